// Package plugins decides what a Job's spec.plugins add to its pods and create beside them, so
// that a framework's processes find each other without the user wiring it by hand:
//
//   - env gives every container its pod's index in its task.
//   - svc gives every pod a stable DNS name, <job>-<task>-<index>.<job>, through a headless
//     Service named after the job, and tells every pod the names of all pods of every task
//     (environment variables and files under /etc/tephra/, also /etc/volcano/).
//   - ssh lets the job's pods log in to each other as root with one key pair, generated once per
//     job and kept in a Secret.
//   - pytorch, tensorflow and mpi set what those frameworks read to form a cluster
//     (MASTER_ADDR/RANK/WORLD_SIZE, TF_CONFIG, MPI_HOST), from the names svc gives the pods.
//   - ray starts a Ray cluster: `ray start --head` in the head task, `ray start --address` in
//     the workers, and a Service <job>-head-svc for the head's GCS, dashboard and client ports.
//
// They follow Volcano's job plugins of the same names, so that Volcano manifests keep working:
// Volcano's VC_ (and VK_) variables are set beside Tephra's TEPHRA_ ones. Objects a plugin
// creates are owned by the job (a controller reference), so deleting the job deletes them.
//
// A variable, volume, mount or port that the pod template already has is left as the user wrote
// it: plugins only add, except that svc sets the pods' hostname and subdomain, which its names
// depend on. The pytorch, tensorflow, mpi and ray plugins need svc (and mpi ssh); ForJob adds them to
// a job that does not list them.
//
// OnJobAdd reads the Services, ConfigMaps and Secrets it manages through the client it is given;
// with a caching client that means watching those kinds.
package plugins
