package launcher

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/dlock-go/dlock/internal/topology"
)

// preparePostgres creates the cluster in dir on first start: initdb with the
// dlock role as superuser (password auth over TCP, trust on the private
// socket), then CREATE DATABASE in single-user mode, so nothing listens
// before the database exists. PostgreSQL refuses to run as root: as root it
// runs as the postgres system user, who then owns dir. It returns the
// credential to start the server with (nil: the current user).
func (l *Launcher) preparePostgres(ctx context.Context, dir string, fresh bool, log io.Writer) (*syscall.Credential, error) {
	cred, err := postgresCredential()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err == nil {
		return cred, nil
	}
	if !fresh {
		// A previous initdb did not finish: start over.
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	pw, err := os.CreateTemp(filepath.Dir(dir), "postgres-pw-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(pw.Name())
	if _, err := pw.WriteString(topology.PostgresPassword + "\n"); err != nil {
		return nil, err
	}
	if err := pw.Close(); err != nil {
		return nil, err
	}
	if cred != nil {
		for _, p := range []string{dir, pw.Name()} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, err
			}
		}
	}

	initdb, err := lookPath("initdb")
	if err != nil {
		return nil, err
	}
	if err := runAs(ctx, cred, log, "", initdb, "-D", dir, "-U", topology.PostgresUser,
		"--pwfile="+pw.Name(), "--auth-host=scram-sha-256", "--auth-local=trust",
		"-E", "UTF8", "--no-locale", "--no-sync"); err != nil {
		return nil, fmt.Errorf("initdb: %w", err)
	}
	server, err := lookPath(topology.PostgresServer)
	if err != nil {
		return nil, err
	}
	create := fmt.Sprintf("CREATE DATABASE %s OWNER %s;\n", topology.PostgresDB, topology.PostgresUser)
	if err := runAs(ctx, cred, log, create, server, "--single", "-D", dir, "-c", "listen_addresses=", "postgres"); err != nil {
		return nil, fmt.Errorf("create database: %w", err)
	}
	return cred, nil
}

// postgresCredential is the postgres system user when running as root.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL refuses to run as root and there is no postgres user: %w (%s)", err, installHint)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("postgres user has uid %q gid %q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// runAs runs a command to completion as cred, with stdin, output to log.
func runAs(ctx context.Context, cred *syscall.Credential, log io.Writer, stdin, path string, args ...string) error {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w (see the node's log)", filepath.Base(path), err)
	}
	return nil
}
