package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/memory"
	"github.com/dlock-go/dlock/fence"
)

func ExampleRule() {
	seen := fence.Rule{Resource: "stock/apple", Highest: 7}
	fmt.Println(seen.Check(7)) // the same holder again
	fmt.Println(seen.Check(8)) // a newer holder
	fmt.Println(seen.Check(6)) // a holder paused past its lease
	err := seen.Check(0)       // no lock held
	fmt.Println(errors.Is(err, fence.ErrNoToken))
	// Output:
	// <nil>
	// <nil>
	// fence: stale token 6 for resource "stock/apple": a newer holder has token 7
	// true
}

// A service that owns the resource checks each request's token, with the
// operation inside Do so that no other holder can slip in between.
func ExampleMemory_Do() {
	var guard fence.Memory
	balance := 100
	withdraw := func(token dlock.Token, amount int) error {
		return guard.Do("account/1", token, func() error {
			balance -= amount
			return nil
		})
	}
	fmt.Println(withdraw(2, 10)) // holder with token 2
	fmt.Println(withdraw(3, 20)) // the next holder
	fmt.Println(withdraw(2, 30)) // the first one, resumed after a pause
	fmt.Println(balance)
	// Output:
	// <nil>
	// <nil>
	// fence: stale token 2 for resource "account/1": a newer holder has token 3
	// 70
}

// A lock holder reads and updates a row in one fenced transaction.
//
// Any database/sql driver works; this one is pgx's (import
// _ "github.com/jackc/pgx/v5/stdlib", which registers "pgx").
func ExampleSQLTable_Tx() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://dlock:dlock@127.0.0.1:5433/dlock?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	var ft fence.SQLTable // table dlock_fence
	if err := ft.Create(ctx, db); err != nil {
		log.Fatal(err)
	}

	locker, err := dlock.Open(ctx, "mem://")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	m, _ := locker.NewMutex("account/1")
	err = dlock.Do(ctx, m, func(context.Context) error {
		return ft.Tx(ctx, db, nil, "account/1", m.Token(), func(tx *sql.Tx) error {
			var balance int
			if err := tx.QueryRowContext(ctx, `SELECT balance FROM accounts WHERE id = 1`).Scan(&balance); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = $1 WHERE id = 1`, balance-10)
			return err
		})
	})
	if errors.Is(err, fence.ErrStale) {
		log.Print("lost the lock while paused; a newer holder has acted")
	}
}

// Rows that carry their own fence column: one statement checks and acts.
func ExampleSQLColumn() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://dlock:dlock@127.0.0.1:5433/dlock?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	// CREATE TABLE stock (sku text PRIMARY KEY, qty integer NOT NULL,
	//                     fence_token bigint NOT NULL DEFAULT 0)
	stock := fence.SQLColumn{Table: "stock", Key: "sku"}
	var token dlock.Token = 42 // m.Token() of the held lock

	var qty int
	if err := stock.Read(ctx, db, "apple", token, "qty", &qty); err != nil {
		log.Fatal(err) // ErrStale: a newer holder has read or written the row
	}
	if qty > 0 {
		err = stock.Update(ctx, db, "apple", token, "qty = qty - 1")
		if errors.Is(err, fence.ErrStale) {
			log.Print("refused: a newer holder took over after our read")
		}
	}
}
