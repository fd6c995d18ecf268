package launcher

import "context"

// The functions below act on the Default launcher: every topology, state in
// $DLOCK_STATE_DIR or .dlock/ at the module root, where `make up` put it.

// Up starts the named topologies (all when none are named); see
// Launcher.Up.
func Up(ctx context.Context, topologies []string, opts ...Option) error {
	l, err := Default()
	if err != nil {
		return err
	}
	return l.Up(ctx, topologies, opts...)
}

// Down stops every node and removes the state; see Launcher.Down.
func Down(ctx context.Context) error {
	l, err := Default()
	if err != nil {
		return err
	}
	return l.Down(ctx)
}

// Start starts one node again and waits until it is ready; see
// Launcher.Start.
func Start(ctx context.Context, node string, opts ...Option) error {
	l, err := Default()
	if err != nil {
		return err
	}
	return l.Start(ctx, node, opts...)
}

// Stop stops one node gracefully; see Launcher.Stop.
func Stop(ctx context.Context, node string) error { return withDefault(ctx, node, (*Launcher).Stop) }

// Kill sends SIGKILL to one node; see Launcher.Kill.
func Kill(ctx context.Context, node string) error { return withDefault(ctx, node, (*Launcher).Kill) }

// Pause sends SIGSTOP to one node; see Launcher.Pause.
func Pause(ctx context.Context, node string) error { return withDefault(ctx, node, (*Launcher).Pause) }

// Resume sends SIGCONT to one node; see Launcher.Resume.
func Resume(ctx context.Context, node string) error {
	return withDefault(ctx, node, (*Launcher).Resume)
}

// Leader returns the node leading the named topology; see Launcher.Leader.
func Leader(ctx context.Context, topology string) (string, error) {
	l, err := Default()
	if err != nil {
		return "", err
	}
	return l.Leader(ctx, topology)
}

// Addr returns the client address (host:port) of a node.
func Addr(node string) (string, error) {
	l, err := Default()
	if err != nil {
		return "", err
	}
	return l.Addr(node)
}

// Nodes returns the node names of a topology, e.g. redlock-1 ... redlock-5.
func Nodes(topology string) ([]string, error) {
	l, err := Default()
	if err != nil {
		return nil, err
	}
	return l.Nodes(topology)
}

func withDefault(ctx context.Context, node string, do func(*Launcher, context.Context, string) error) error {
	l, err := Default()
	if err != nil {
		return err
	}
	return do(l, ctx, node)
}
