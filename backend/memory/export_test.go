package memory

import "github.com/dlock-go/dlock/driver"

// NewDriver returns a driver over s, as New's Lockers are made over.
func NewDriver(s *Store) driver.Locker { return s.driver() }
