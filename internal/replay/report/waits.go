package report

import "math"

// heldBesideIdle sums, over the grid, the jobs' wait while their queue held at least its deserved
// share and the cluster's free GPUs could hold the job's minimum, and all the jobs' wait.
func heldBesideIdle(run Run, out *Outcomes, index map[string]int, g grid, end float64) (held, all float64) {
	s := &out.Series
	if g.n == 0 || len(s.Allocated) != g.n {
		return 0, 0
	}
	for _, j := range run.Jobs {
		started := end
		if len(j.Started) > 0 {
			started = j.Started[0]
		}
		qi, need := index[queueOf(j)], float64(j.MinReplicas*j.GPUs)
		from, to := g.span(j.Submit, started)
		for k := from; k < to; k++ {
			all += g.dt
			free := (1 - s.Allocated[k]) * float64(out.GPUs)
			if s.Share[qi][k] >= s.Deserved[qi][k]-1e-9 && free >= need {
				held += g.dt
			}
		}
	}
	return held, all
}

// freeWhileBigGangsWait is the mean free GPUs on whole nodes and on partly held ones over the
// grid times at which a big gang waited (submitted, its minimum not yet running), from the nodes
// the pods were bound to.
func freeWhileBigGangsWait(run Run, g grid, end float64) (whole, scattered float64) {
	if run.Nodes <= 0 || run.NodeGPUs <= 0 || g.n == 0 {
		return math.NaN(), math.NaN()
	}
	waiting := make([]bool, g.n)
	for _, j := range run.Jobs {
		if j.Replicas*j.GPUs < BigGangGPUs {
			continue
		}
		started := end
		if len(j.Started) > 0 {
			started = j.Started[0]
		}
		from, to := g.span(j.Submit, started)
		for k := from; k < to; k++ {
			waiting[k] = true
		}
	}
	held := make([]map[string]int, g.n)
	for _, j := range run.Jobs {
		for _, p := range j.Pods {
			if p.Node == "" || math.IsNaN(p.Bound) {
				continue
			}
			ended := p.Ended
			if math.IsNaN(ended) {
				ended = end
			}
			from, to := g.span(p.Bound, ended)
			for k := from; k < to; k++ {
				if !waiting[k] {
					continue
				}
				if held[k] == nil {
					held[k] = map[string]int{}
				}
				held[k][p.Node] += j.GPUs
			}
		}
	}
	samples := 0
	for k := range g.n {
		if !waiting[k] {
			continue
		}
		samples++
		used := 0
		for _, gpus := range held[k] {
			used += min(gpus, run.NodeGPUs)
		}
		free := run.Nodes*run.NodeGPUs - used
		w := (run.Nodes - len(held[k])) * run.NodeGPUs
		whole += float64(w)
		scattered += float64(free - w)
	}
	if samples == 0 {
		return math.NaN(), math.NaN()
	}
	return whole / float64(samples), scattered / float64(samples)
}
