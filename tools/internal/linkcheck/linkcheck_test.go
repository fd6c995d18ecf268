package linkcheck

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// symbols builds the program in testdata/name and returns its symbol
// table.
func symbols(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	build := exec.Command("go", "build", "-o", bin, "./testdata/"+name)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", name, err, out)
	}
	out, err := exec.Command("go", "tool", "nm", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool nm %s: %v\n%s", name, err, out)
	}
	return string(out)
}

var heavy = []string{
	"github.com/redis/go-redis/v9.NewClusterClient",
	"github.com/redis/go-redis/v9.NewFailoverClient",
}

func TestRedisOnlyProgramLinksNoClusterOrSentinelClient(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs")
	}
	for _, s := range heavy {
		if !strings.Contains(symbols(t, "withcluster"), s) {
			t.Fatalf("a program importing rediscluster and redissentinel has no %s: the check below would prove nothing", s)
		}
	}
	syms := symbols(t, "redisonly")
	for _, s := range heavy {
		if strings.Contains(syms, s) {
			t.Errorf("a program importing only dlock, backend/redis and redisfence links %s", s)
		}
	}
}
