package launcher

import (
	"context"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/topology"
)

// Every kind a topology runs has an entry in the kind table, with a
// readiness probe; a kind the table lacks is refused by name rather than
// started blind.
func TestEveryKindDescribed(t *testing.T) {
	for _, tp := range topology.All() {
		d, ok := kinds[tp.Kind]
		if !ok {
			t.Errorf("topology %s: kind %q has no entry in the launcher's kind table (kinds.go)", tp.Name, tp.Kind)
			continue
		}
		if d.probe == nil {
			t.Errorf("kind %q has no readiness probe", tp.Kind)
		}
	}
	err := probe(context.Background(), topology.Topology{Kind: "mysql"}, topology.Node{})
	if err == nil || !strings.Contains(err.Error(), `no readiness check for kind "mysql"`) {
		t.Errorf("probe of an unknown kind: %v", err)
	}
}
