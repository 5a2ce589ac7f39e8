package ledger

import "github.com/tephra-dev/tephra/internal/quota"

// account adds (sign 1) or removes (sign -1) an entry's contribution to the sums.
func (l *Ledger) account(e *Entry, sign int64) {
	l.version++
	if e.Group != "" {
		defer l.refreshShort(e.Group)
	}
	if e.Group != "" && e.Placed() {
		AddSigned(l.groupPlaced, e.Group, e.Requests, sign)
		l.groupCount[e.Group] += int(sign)
		if l.groupCount[e.Group] == 0 {
			delete(l.groupCount, e.Group)
			delete(l.groupPlaced, e.Group)
		}
	}
	c := e.Charge()
	if c.Member() {
		l.groupMembers[e.Group] += int(sign)
		if l.groupMembers[e.Group] == 0 {
			delete(l.groupMembers, e.Group)
		}
	}
	if e.Queue == "" {
		return
	}
	if e.Group == "" || e.Carried {
		l.countSingle(e.Queue, c.Standing, sign)
	}
	// The claims the pod names directly count once per queue (addClaims), not in own.
	own := e.Requests
	if len(e.Claims) > 0 {
		own = e.Requests.Clone()
		own.Sub(e.Direct)
	}
	switch {
	case c.Standing == quota.Placed:
		AddSigned(l.allocated, e.Queue, own, sign)
		addClaims(l.allocated, l.placedClaims, e.Queue, e.Namespace, e.Claims, sign)
		if e.Terminating {
			AddSigned(l.terminating, e.Queue, own, sign)
		}
	case c.Demand():
		AddSigned(l.pending, e.Queue, own, sign)
		addClaims(l.pending, l.pendingClaims, e.Queue, e.Namespace, e.Claims, sign)
		if e.Group != "" {
			byQueue := l.groupPending[e.Group]
			if byQueue == nil {
				byQueue = map[string]quota.Amounts{}
				l.groupPending[e.Group] = byQueue
			}
			AddSigned(byQueue, e.Queue, own, sign)
			if len(byQueue) == 0 {
				delete(l.groupPending, e.Group)
			}
		}
		if e.Nominated {
			AddSigned(l.nominated, e.Queue, own, sign)
			if e.Group != "" {
				l.groupNominated[e.Group] += int(sign)
				if l.groupNominated[e.Group] == 0 {
					delete(l.groupNominated, e.Group)
				}
			}
		}
	}
}

func AddSigned(sums map[string]quota.Amounts, key string, add quota.Amounts, sign int64) {
	sum := sums[key]
	if sum == nil {
		sum = quota.Amounts{}
		sums[key] = sum
	}
	for name, v := range add {
		sum[name] += sign * v
		if sum[name] == 0 {
			delete(sum, name)
		}
	}
	if len(sum) == 0 {
		delete(sums, key)
	}
}

func CloneSums(sums map[string]quota.Amounts) map[string]quota.Amounts {
	out := make(map[string]quota.Amounts, len(sums))
	for k, v := range sums {
		out[k] = v.Clone()
	}
	return out
}

// countSingle counts a pod without a group, or that carries its group of one, placed or waiting,
// in its queue.
func (l *Ledger) countSingle(queue string, standing quota.Standing, sign int64) {
	s := l.singles[queue]
	switch standing {
	case quota.Placed:
		s.Placed += int32(sign)
	case quota.Waiting:
		s.Waiting += int32(sign)
	default:
		return
	}
	if s == (Singles{}) {
		delete(l.singles, queue)
		return
	}
	l.singles[queue] = s
}
