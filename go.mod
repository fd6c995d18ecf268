module github.com/dlock-go/dlock

go 1.24
