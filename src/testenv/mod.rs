//! A real local Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager) for tests and the demo.
