module github.com/dlock-go/dlock/backend/zookeeper

go 1.24.0

require github.com/go-zookeeper/zk v1.0.4

require github.com/dlock-go/dlock v0.0.0-00010101000000-000000000000

// Development: the root module from this checkout. Replace directives
// apply only when this module is the main module, so users never see it.
replace github.com/dlock-go/dlock => ../..
