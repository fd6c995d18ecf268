package launcher

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// A port claimed by a live process is refused to every other process; a
// claim whose process is gone is taken over; a process may claim its own
// port again.
func TestClaimAcrossProcesses(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	const p = 23456
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() }()
	if err := os.MkdirAll(claimDir(), 0o777); err != nil {
		t.Fatal(err)
	}
	held := claimDir() + "/" + strconv.Itoa(p)
	if err := os.WriteFile(held, []byte(strconv.Itoa(sleeper.Process.Pid)), 0o666); err != nil {
		t.Fatal(err)
	}
	if claim(p) {
		t.Fatal("claimed a port another live process holds")
	}
	_ = sleeper.Process.Kill()
	_ = sleeper.Wait()
	if !claim(p) {
		t.Fatal("a claim whose process is gone was not taken over")
	}
	if b, _ := os.ReadFile(held); string(b) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("claim file holds %q, want this process's PID", b)
	}
	if !claim(p) {
		t.Fatal("this process could not claim its own port again")
	}
	used := map[int]bool{}
	for range 20 {
		n, err := freePort(used)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(claimDir() + "/" + strconv.Itoa(n)); string(b) != strconv.Itoa(os.Getpid()) {
			t.Fatalf("freePort returned %d without claiming it", n)
		}
	}
}
