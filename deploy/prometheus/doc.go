// Package prometheus holds the tests of cardsignd's Prometheus alert rules
// (cardsignd-alerts.yaml) and Grafana dashboard (../grafana/cardsignd.json):
// every PromQL expression in them parses with Prometheus's own parser and
// names only metrics a real cardsignd exports. It is a module of its own so
// that Prometheus never enters the daemon's dependency graph.
package prometheus
