package engine

// persistGate holds a queue's requests on the durability of member state
// (Backend.Persist), for Executor and ParityExecutor alike: requests done
// but not to be acknowledged before a state generation is durable
// (waiting), and writes planned around a member failure not yet durable,
// held unissued (holding). Single-threaded, like its executor.
type persistGate struct {
	persisted uint64   // the newest durable state generation
	waiting   []uint16 // requests done, waiting for Persisted
	holding   []uint16 // writes planned, not issued until Persisted
	releasing bool     // release is running
}

// gated is what a persistGate needs of its executor.
type gated interface {
	// gateReq is request tag's generation to wait for, and its result.
	gateReq(tag uint16) (needGen uint64, err error)
	// finish completes request tag with err.
	finish(tag uint16, err error)
	// replan plans held write tag again from the state now (nothing of
	// its old plan was issued) and issues it.
	replan(tag uint16)
}

func (g *persistGate) init(gen uint64, depth int) {
	g.persisted = gen
	g.waiting = make([]uint16, 0, depth)
	g.holding = make([]uint16, 0, depth)
}

// persistedTo records that generation gen is durable: requests that
// waited for it complete, writes held for it are issued.
func (g *persistGate) persistedTo(gen uint64, x gated) {
	if gen <= g.persisted {
		return
	}
	g.persisted = gen
	w := g.waiting[:0]
	for _, tag := range g.waiting {
		if need, err := x.gateReq(tag); need <= gen {
			x.finish(tag, err)
		} else {
			w = append(w, tag)
		}
	}
	g.waiting = w
	g.release(x)
}

// release plans again, and so issues, the writes held for a generation
// that is durable now. Planning may hold a write again and persist, which
// calls back here: the outer call goes on, and it looks at the list
// afresh after each write.
func (g *persistGate) release(x gated) {
	if g.releasing {
		return
	}
	g.releasing = true
	defer func() { g.releasing = false }()
	for {
		i := -1
		for j, tag := range g.holding {
			if need, _ := x.gateReq(tag); need <= g.persisted {
				i = j
				break
			}
		}
		if i < 0 {
			return
		}
		tag := g.holding[i]
		g.holding = append(g.holding[:i], g.holding[i+1:]...)
		x.replan(tag)
	}
}

// failAll finishes every request waiting for a persist, and every write
// held unissued, with err: the new member state could not be recorded.
func (g *persistGate) failAll(x gated, err error) {
	for _, tag := range g.waiting {
		x.finish(tag, err)
	}
	g.waiting = g.waiting[:0]
	for len(g.holding) > 0 {
		tag := g.holding[len(g.holding)-1]
		g.holding = g.holding[:len(g.holding)-1]
		x.finish(tag, err)
	}
}
