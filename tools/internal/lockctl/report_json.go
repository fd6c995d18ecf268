package lockctl

import (
	"encoding/json"
	"io"
)

// writeJSON prints the report for machines.
func writeJSON(w io.Writer, rep benchReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}
