package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progressBar shows how far a scenario's drain is: redrawn in place on a terminal, a line every
// few seconds otherwise (logs, CI).
type progressBar struct {
	w      io.Writer
	tty    bool
	label  string
	total  int
	start  time.Time
	last   time.Time
	width  int
	closed bool
}

// newProgressBar starts a bar for total items, counting its rate from start.
func newProgressBar(w io.Writer, label string, total int, start time.Time) *progressBar {
	if w == nil {
		w = io.Discard
	}
	tty := false
	if f, ok := w.(*os.File); ok {
		if info, err := f.Stat(); err == nil {
			tty = info.Mode()&os.ModeCharDevice != 0
		}
	}
	return &progressBar{w: w, tty: tty, label: label, total: total, start: start, width: 30}
}

// update shows done of total, with a note (e.g. the state of the scheduler).
func (p *progressBar) update(done int, note string) {
	now := time.Now()
	if !p.tty && now.Sub(p.last) < 5*time.Second {
		return
	}
	p.last = now
	p.draw(done, note)
}

// finish draws the final state and ends the line.
func (p *progressBar) finish(done int, note string) {
	if p.closed {
		return
	}
	p.closed = true
	p.draw(done, note)
	if p.tty {
		fmt.Fprintln(p.w)
	}
}

func (p *progressBar) draw(done int, note string) {
	fill := 0
	if p.total > 0 {
		fill = min(p.width, done*p.width/p.total)
	}
	elapsed := time.Since(p.start)
	rate := float64(done) / max(elapsed.Seconds(), 1)
	line := fmt.Sprintf("%-28s [%s%s] %6d/%-6d %6.0f/s %6.1fs %s",
		p.label, strings.Repeat("#", fill), strings.Repeat(".", p.width-fill), done, p.total, rate, elapsed.Seconds(), note)
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\033[K", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}
