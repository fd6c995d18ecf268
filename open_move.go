package dlock

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/move"
)

// moveScheme is the scheme of the configurations of a move from one
// backend to another (docs/moving.md):
//
//	move:?from=X&to=Y   C1: every hold on X, then on Y
//	move:?to=Y          C2: Y alone, with tokens above X's (after the commit)
//
// X and Y are backend URLs, query-escaped. It is served by dlock itself,
// not registered: Schemes lists the backends.
const moveScheme = "move"

// OpenDriver opens the driver of a backend URL alone, without the
// portable layer (no Mutexes, no renewal): for tools that work on a
// store itself, such as lockctl's move commands. Programs use Open. The
// URL may not carry Open's portable parameters (ttl, autorenew), and the
// caller closes the driver.
func OpenDriver(ctx context.Context, rawURL string) (driver.Locker, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme == "" {
		return nil, fmt.Errorf("%w: %q has no scheme", ErrInvalidURL, rawURL)
	}
	q := u.Query()
	for _, p := range []string{"ttl", "autorenew"} {
		if q.Has(p) {
			return nil, &openError{scheme, fmt.Errorf("%w: %s= belongs on the URL given to Open (in a move, on the move: URL), not on %s", ErrInvalidURL, p, redact(u))}
		}
	}
	open, err := opener(scheme, rawURL)
	if err != nil {
		return nil, err
	}
	d, err := open(ctx, u)
	if err != nil {
		return nil, &openError{scheme, err}
	}
	return d, nil
}

// redact returns u without its password, for messages.
func redact(u *url.URL) string { return u.Redacted() }

// opener returns the OpenFunc of scheme: the registered backend's, or
// the move's.
func opener(scheme, rawURL string) (OpenFunc, error) {
	if scheme == moveScheme {
		return openMove, nil
	}
	registry.RLock()
	open := registry.m[scheme]
	registry.RUnlock()
	if open != nil {
		return open, nil
	}
	if pkg := packageOf(scheme); pkg != "" {
		return nil, fmt.Errorf("%w: scheme %q is not registered: import _ %q (registered: %s)",
			ErrInvalidURL, scheme, pkg, strings.Join(Schemes(), ", "))
	}
	return nil, fmt.Errorf("%w: unknown scheme %q in %q (registered: %s, and move; a backend registers its scheme when its package is imported)",
		ErrInvalidURL, scheme, rawURL, strings.Join(Schemes(), ", "))
}

// openMove opens a move configuration: both inner drivers (C1) or the new
// one (C2), which must then hold the move's commit.
func openMove(ctx context.Context, u *url.URL) (driver.Locker, error) {
	if u.Host != "" || (u.Path != "" && u.Path != "/") || u.Opaque != "" {
		return nil, fmt.Errorf("%w: move: want move:?from=URL&to=URL (query-escaped URLs), got %s", ErrInvalidURL, redact(u))
	}
	p := driver.NewParams(u)
	from := p.String("from", "")
	to := p.String("to", "")
	if err := p.Done(); err != nil {
		return nil, err
	}
	if to == "" {
		return nil, fmt.Errorf("%w: move: to= (the new backend's URL) is required", ErrInvalidURL)
	}
	for _, inner := range []string{from, to} {
		if s, _, ok := strings.Cut(inner, ":"); ok && strings.EqualFold(s, moveScheme) {
			return nil, fmt.Errorf("%w: move: a move cannot be inside a move", ErrInvalidURL)
		}
	}
	if from == to {
		return nil, fmt.Errorf("%w: move: from and to name the same store", ErrInvalidURL)
	}
	y, err := OpenDriver(ctx, to)
	if err != nil {
		return nil, fmt.Errorf("move: to: %w", err)
	}
	var d driver.Locker
	if from == "" {
		d, err = move.NewC2(ctx, y)
		if err != nil {
			_ = y.Close()
			return nil, err
		}
		return d, nil
	}
	x, err := OpenDriver(ctx, from)
	if err != nil {
		_ = y.Close()
		return nil, fmt.Errorf("move: from: %w", err)
	}
	d, err = move.NewC1(ctx, x, y)
	if err != nil {
		_ = errors.Join(y.Close(), x.Close())
		if errors.Is(err, ErrInvalidOption) && !errors.Is(err, ErrInvalidURL) {
			err = fmt.Errorf("%w: %w", ErrInvalidURL, err)
		}
		return nil, err
	}
	return d, nil
}
