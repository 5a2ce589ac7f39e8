package consolidation

import (
	"errors"
	"fmt"
)

// DefaultMaxMovesPerGang bounds the pods one plan moves unless the args say otherwise: enough to
// free two 8-GPU nodes of one-GPU pods.
const DefaultMaxMovesPerGang = 8

// Args configure consolidation, as TephraGang's arg consolidation:
//
//	consolidation:
//	  enabled: true
//	  maxMovesPerGang: 8
type Args struct {
	// Enabled lets TephraGang move pods that may move to make whole nodes for a waiting gang.
	// Default true: only pods that declared themselves movable, or run above their group's
	// minimum, ever move.
	Enabled *bool `json:"enabled,omitempty"`
	// MaxMovesPerGang bounds the pods moved for one gang at a time: a gang that needs more moves
	// than this gets none. Default 8.
	MaxMovesPerGang *int32 `json:"maxMovesPerGang,omitempty"`
}

// SetDefaults fills what is unset.
func (a *Args) SetDefaults() {
	if a.Enabled == nil {
		a.Enabled = new(true)
	}
	if a.MaxMovesPerGang == nil {
		a.MaxMovesPerGang = new(int32(DefaultMaxMovesPerGang))
	}
}

// Validate says what is wrong with defaulted args.
func (a *Args) Validate() error {
	var errs []error
	if v := *a.MaxMovesPerGang; v < 1 || v > 1000 {
		errs = append(errs, fmt.Errorf("consolidation.maxMovesPerGang: %d is not between 1 and 1000", v))
	}
	return errors.Join(errs...)
}
