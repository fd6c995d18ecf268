module github.com/dlock-go/dlock/backend/zookeeper

go 1.24.0

require github.com/go-zookeeper/zk v1.0.4

require github.com/dlock-go/dlock v0.1.0

require golang.org/x/sys v0.41.0 // indirect
