package localcluster

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// auditPolicy records, without bodies, every request of a service account in tephra-system:
// what Tephra's components ask of the apiserver. A watch is logged when its response starts,
// since it completes only when the component stops. It also records every deletion of a pod,
// whoever asks for it, so that a pod's history is whole: which of its deletions were Tephra's
// and which the nodes' (kwok), the garbage collector's or a test's.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts:tephra-system"]
- level: Metadata
  verbs: ["delete", "deletecollection"]
  resources: [{group: "", resources: ["pods"]}]
- level: None
`

// APIRequest is one request that the apiserver audited (Options.AuditTephra).
type APIRequest struct {
	User, Verb                                       string
	APIGroup, Resource, Subresource, Namespace, Name string
	Code                                             int
}

// auditArgs writes the audit policy and returns the apiserver flags that log with it.
func (c *Cluster) auditArgs() ([]string, error) {
	policy := filepath.Join(c.opts.Dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return nil, err
	}
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + c.auditLogPath(),
		"--audit-log-format=json",
		"--audit-log-maxsize=0",
	}, nil
}

func (c *Cluster) auditLogPath() string { return filepath.Join(c.opts.Dir, "logs", "audit.log") }

// AuditedRequests returns the requests of Tephra's service accounts that the apiserver has
// logged so far (Options.AuditTephra must be set).
func (c *Cluster) AuditedRequests() ([]APIRequest, error) {
	if !c.opts.AuditTephra {
		return nil, fmt.Errorf("the cluster was started without Options.AuditTephra")
	}
	f, err := os.Open(c.auditLogPath())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []APIRequest
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for scanner.Scan() {
		var event struct {
			Verb string `json:"verb"`
			User struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef *struct {
				APIGroup    string `json:"apiGroup"`
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
				Namespace   string `json:"namespace"`
				Name        string `json:"name"`
			} `json:"objectRef"`
			ResponseStatus *struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if err := json.Unmarshal(scanner.Bytes(), &event); err != nil {
			return nil, fmt.Errorf("%s: %w", c.auditLogPath(), err)
		}
		r := APIRequest{User: event.User.Username, Verb: event.Verb}
		if ref := event.ObjectRef; ref != nil {
			r.APIGroup, r.Resource, r.Subresource, r.Namespace, r.Name = ref.APIGroup, ref.Resource, ref.Subresource, ref.Namespace, ref.Name
		}
		if event.ResponseStatus != nil {
			r.Code = event.ResponseStatus.Code
		}
		out = append(out, r)
	}
	return out, scanner.Err()
}
