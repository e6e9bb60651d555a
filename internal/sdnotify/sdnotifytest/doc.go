// Package sdnotifytest is a service manager's end of NOTIFY_SOCKET for
// tests: a real unixgram socket that receives package sdnotify's messages
// (Linux only, as the notifications are).
package sdnotifytest
