// Package daemontest is a fake daemon.Backend for tests of the control
// API and its clients: arrays live in memory, with the real Manager's
// error conventions (statuses), and no device is touched.
package daemontest
