// Package oteltest checks package dlockotel's instruments and spans against
// the real servers of every backend kind (Redis, Redlock, etcd, ZooKeeper,
// Consul), and the causes it records for holds lost to a stopped server
// and to a lock broken from outside. It lives in the tools module so that
// the otel module needs no backend's client.
package oteltest
