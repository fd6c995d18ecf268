// Package sqlfencetest runs the tests and benchmarks of package fence's
// database/sql checkers (SQLTable, SQLColumn) against a real PostgreSQL
// (DLOCK_POSTGRES_URL). They live in the tools module because they need a
// SQL driver (pgx), which the library module must not require: a user of
// package fence brings the driver of their choice.
package sqlfencetest
