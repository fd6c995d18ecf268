package redislua

import "testing"

func TestCutNames(t *testing.T) {
	var out [3]string
	CutNames(out[:], [][3]string{{"{p:k}", ":lock"}, {"p", "t:", "a/b"}, {"", "", ""}})
	want := [3]string{"{p:k}:lock", "pt:a/b", ""}
	if out != want {
		t.Fatalf("CutNames = %q, want %q", out, want)
	}
	// One string for all the names, not one per name.
	parts := [][3]string{{"p", "l:", "key"}, {"p", "t:", "key"}, {"p", "r:", "key"}, {"p", "i"}}
	var four [4]string
	if n := testing.AllocsPerRun(100, func() { CutNames(four[:], parts) }); n != 1 {
		t.Fatalf("CutNames made %v allocations, want 1", n)
	}
	if four[3] != "pi" || four[0] != "pl:key" {
		t.Fatalf("CutNames = %q", four)
	}
}
