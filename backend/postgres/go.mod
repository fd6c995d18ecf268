module github.com/dlock-go/dlock/backend/postgres

go 1.24.0

require github.com/jackc/pgx/v5 v5.8.0

require github.com/dlock-go/dlock v0.0.0-00010101000000-000000000000

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.2 // indirect
	golang.org/x/sync v0.17.0 // indirect
	golang.org/x/text v0.29.0 // indirect
)

// Development: the root module from this checkout. Replace directives
// apply only when this module is the main module, so users never see it.
replace github.com/dlock-go/dlock => ../..
