package queue

import "github.com/tephra-dev/tephra/plugins/internal/ledger/ledgertest"

const gpu = ledgertest.GPU
