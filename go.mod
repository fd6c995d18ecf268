module github.com/dlock-go/dlock

go 1.24.0

require (
	github.com/redis/go-redis/v9 v9.22.0
	golang.org/x/sys v0.41.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/stretchr/testify v1.11.1 // indirect
	go.uber.org/atomic v1.11.0 // indirect
)
