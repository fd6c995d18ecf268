package lockctl

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress draws lockctl bench's progress bar on a terminal. Its unit is
// the milliseconds of measuring time scheduled (scenarios x backends x
// --duration); setup time between runs does not move it. On anything but a
// terminal it draws nothing.
type progress struct {
	bar      *progressbar.ProgressBar
	runs     int
	duration time.Duration

	mu      sync.Mutex
	n       int       // runs finished
	started time.Time // measuring start of the current run; zero before
	label   string
	stop    chan struct{}
	done    chan struct{}
}

func newProgress(w io.Writer, cfg benchConfig) *progress {
	p := &progress{runs: len(cfg.scenarios) * len(cfg.urls), duration: cfg.duration}
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return p
	}
	p.bar = progressbar.NewOptions64(int64(p.runs)*cfg.duration.Milliseconds(),
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetWidth(30),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionFullWidth(),
		progressbar.OptionShowElapsedTimeOnFinish(),
	)
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go p.tick()
	return p
}

// tick moves the bar with the clock while a run measures.
func (p *progress) tick() {
	defer close(p.done)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			pos := int64(p.n) * p.duration.Milliseconds()
			if !p.started.IsZero() {
				pos += min(time.Since(p.started), p.duration).Milliseconds()
			}
			_ = p.bar.Set64(pos)
			p.mu.Unlock()
		}
	}
}

// begin announces the next run (its setup starts).
func (p *progress) begin(backend, scenario string) {
	if p.bar == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.label = fmt.Sprintf("[%d/%d] %s %s", p.n+1, p.runs, scenario, backend)
	p.bar.Describe(p.label)
}

// start marks the start of the measured part of the current run.
func (p *progress) start() {
	if p.bar == nil {
		return
	}
	p.mu.Lock()
	p.started = time.Now()
	p.mu.Unlock()
}

// end marks the current run finished.
func (p *progress) end() {
	if p.bar == nil {
		return
	}
	p.mu.Lock()
	p.n++
	p.started = time.Time{}
	_ = p.bar.Set64(int64(p.n) * p.duration.Milliseconds())
	p.mu.Unlock()
}

// finish clears the bar.
func (p *progress) finish() {
	if p.bar == nil {
		return
	}
	close(p.stop)
	<-p.done
	_ = p.bar.Finish()
}
