// Package refusal keeps the message of a pod's refusal steady while only its figures change.
//
// kube-scheduler writes a refused pod's PodScheduled condition from the scheduling loop itself,
// one API round trip per refusal, and skips the write only when the condition is unchanged.
// Tephra's refusals name live figures ("nvidia.com/gpu 8 (10 free)", "193 of 185 deserved"), and
// on a busy cluster those change between two attempts of the same pod: on the replayed synthetic
// day, 9 065 of 19 921 refusals wrote the condition only because a figure had moved, about 3.5
// of the scheduling loop's 12 minutes. A Memo hands a pod back the message it was last refused
// with while the new refusal says the same thing with other figures and the old message is
// younger than Refresh. Figures in a pod's condition are so at most Refresh old; a different
// reason is written at once, and `kubectl tephra why` computes its answer afresh.
package refusal

import (
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
)

// Refresh is how old the figures of a refusal may be before a refusal with new figures is
// written. A minute is below kube-scheduler's own periodic retry of unschedulable pods (five
// minutes), so a pod that waits long shows figures that moved; it is long enough that a pod
// retried on every cluster event writes its condition a few times a minute at most.
const Refresh = time.Minute

// Memo remembers, per pod and extension point, the last refusal message returned.
type Memo struct {
	now     func() time.Time
	refresh time.Duration

	mu        sync.Mutex
	last      map[key]entry
	lastSweep time.Time
}

// Point is the extension point a refusal came from: a pod refused at both keeps a message for
// each, as kube-scheduler joins them into one condition.
type Point uint8

const (
	PreFilter Point = iota
	PostFilter
	points
)

type key struct {
	pod   types.UID
	point Point
}

type entry struct {
	shape   string
	reasons []string
	at      time.Time
}

// NewMemo returns a Memo that keeps messages for Refresh.
func NewMemo() *Memo { return NewMemoWithClock(time.Now, Refresh) }

// NewMemoWithClock returns a Memo with its clock and refresh set, for tests. A refresh of zero
// or less keeps nothing: every refusal is returned as it is.
func NewMemoWithClock(now func() time.Time, refresh time.Duration) *Memo {
	return &Memo{now: now, refresh: refresh, last: map[key]entry{}}
}

// Steady returns the status a pod's refusal at the extension point should be reported with: the
// pod's last refusal there when it is the same but for its figures and younger than the refresh,
// else s itself, which it remembers. Statuses other than refusals pass unchanged; a pod that
// passes the extension point starts afresh.
func (m *Memo) Steady(pod *corev1.Pod, point Point, s *fwk.Status) *fwk.Status {
	if m == nil || m.refresh <= 0 || pod == nil {
		return plain(s)
	}
	if s.IsSuccess() || s.IsSkip() {
		// The refusal is over: the next one, even with the same reason, is news.
		m.forget(key{pod.UID, point})
		return s
	}
	if len(s.Reasons()) == 0 || (s.Code() != fwk.Unschedulable && s.Code() != fwk.UnschedulableAndUnresolvable) {
		return plain(s)
	}
	shape := Shape(strings.Join(s.Reasons(), "\n"))
	s = plain(s)
	reasons := s.Reasons()
	now := m.now()
	k := key{pod.UID, point}

	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(now)
	if e, ok := m.last[k]; ok && e.shape == shape && now.Sub(e.at) < m.refresh {
		if slices.Equal(e.reasons, reasons) {
			return s
		}
		return fwk.NewStatus(s.Code(), e.reasons...).WithPlugin(s.Plugin())
	}
	m.last[k] = entry{shape: shape, reasons: append([]string(nil), reasons...), at: now}
	return s
}

func (m *Memo) forget(k key) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.last, k)
}

// Forget drops what the Memo remembers of a pod: it was bound or deleted.
func (m *Memo) Forget(uid types.UID) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for point := range points {
		delete(m.last, key{uid, point})
	}
}

// sweep drops, at most once a refresh, the messages too old to be handed back, so that pods
// deleted without a word to the Memo do not stay in it.
func (m *Memo) sweep(now time.Time) {
	if now.Sub(m.lastSweep) < m.refresh {
		return
	}
	m.lastSweep = now
	for k, e := range m.last {
		if now.Sub(e.at) >= m.refresh {
			delete(m.last, k)
		}
	}
}

// Marks around a volatile part of a message (Volatile); control characters, which no message
// has otherwise.
const (
	volatileStart = '\x1e'
	volatileEnd   = '\x1f'
)

// Volatile marks a part of a refusal message that may change between attempts while the refusal
// says the same thing, as a figure does: the name of the other group being placed while an
// elastic pod waits, say. Steady counts it as a figure and removes the marks, so a message with
// a volatile part must reach the pod through Steady.
func Volatile(s string) string {
	return string(volatileStart) + s + string(volatileEnd)
}

// plain is s without the marks of its volatile parts.
func plain(s *fwk.Status) *fwk.Status {
	if s == nil {
		return nil
	}
	reasons := s.Reasons()
	marked := false
	for _, r := range reasons {
		if strings.ContainsRune(r, volatileStart) {
			marked = true
			break
		}
	}
	if !marked {
		return s
	}
	unmarked := make([]string, len(reasons))
	for i, r := range reasons {
		unmarked[i] = strings.Map(func(c rune) rune {
			if c == volatileStart || c == volatileEnd {
				return -1
			}
			return c
		}, r)
	}
	return fwk.NewStatus(s.Code(), unmarked...).WithPlugin(s.Plugin())
}

// Shape is a message with each figure, and each part marked Volatile, replaced by '#'. A figure
// is a run of digits and dots
// that starts a word: "(10 free)", "193 of 185", "16Gi", "1.5". Digits inside a name
// ("worker-3", "node7", "nvidia.com/gpu") are part of what the message says, not a figure.
func Shape(msg string) string {
	var b strings.Builder
	b.Grow(len(msg))
	inFigure, inVolatile := false, false
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		switch {
		case c == volatileStart:
			inVolatile = true
			b.WriteByte('#')
			continue
		case c == volatileEnd:
			inVolatile, inFigure = false, false
			continue
		case inVolatile:
			continue
		}
		digit := c >= '0' && c <= '9'
		switch {
		case inFigure && (digit || c == '.' && i+1 < len(msg) && msg[i+1] >= '0' && msg[i+1] <= '9'):
			continue
		case digit && (i == 0 || !inName(msg[i-1])):
			inFigure = true
			b.WriteByte('#')
			continue
		}
		inFigure = false
		b.WriteByte(c)
	}
	return b.String()
}

// inName says whether a character before a digit makes the digit part of a name.
func inName(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == '/'
}
