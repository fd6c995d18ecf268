package main

import (
	"context"
	"flag"
	"fmt"
	"io"
)

func setupCmd(ctx context.Context, args []string, stdout io.Writer) error {
	var c common
	fs := flag.NewFlagSet("setup", flag.ContinueOnError)
	c.register(fs)
	qty := fs.Int("qty", 5, "the stock to start with")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *qty < 0 {
		return fmt.Errorf("%w: -qty must be >= 0", errUsage)
	}
	db, err := openDB(ctx, c.pg)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := setup(ctx, db, c.sku, *qty); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "stock of %s set to %d\n", c.sku, *qty)
	return nil
}

func reportCmd(ctx context.Context, args []string, stdout io.Writer) error {
	var c common
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	c.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	db, err := openDB(ctx, c.pg)
	if err != nil {
		return err
	}
	defer db.Close()
	t, err := readTally(ctx, db, c.sku)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d in stock, %d sold, fence at token %d\n", c.sku, t.Qty, t.Sold, t.Fence)
	return printSales(ctx, stdout, db, c.sku)
}
