package driver_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/driver"
)

func ExampleCheckRecord() {
	fmt.Println(driver.CheckRecord("jobs/nightly", "permits=3"))
	err := driver.CheckRecord("", "permits=3")
	fmt.Println(errors.Is(err, driver.ErrInvalidKey))
	// Output:
	// <nil>
	// true
}

func TestCheckRecord(t *testing.T) {
	for _, c := range []struct {
		key, value string
		want       error
	}{
		{"k", "v", nil},
		{strings.Repeat("k", driver.MaxKeyLen), strings.Repeat("v", driver.MaxRecordLen), nil},
		{"\x00\xff", "é\x00", nil},
		{"", "v", driver.ErrInvalidKey},
		{strings.Repeat("k", driver.MaxKeyLen+1), "v", driver.ErrInvalidKey},
		{"k", "", driver.ErrInvalidOption},
		{"k", strings.Repeat("v", driver.MaxRecordLen+1), driver.ErrInvalidOption},
		{"k", "\xff", driver.ErrInvalidOption},
	} {
		err := driver.CheckRecord(c.key, c.value)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("CheckRecord(%.10q, %.10q) = %v; want %v", c.key, c.value, err, c.want)
		}
	}
}
