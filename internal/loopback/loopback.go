// Package loopback guards an HTTP server bound to loopback against DNS
// rebinding: a page on another site whose name an attacker points at
// 127.0.0.1 reaches the server from the victim's browser, with its own
// name in the Host header. The console and serve's HTTP API refuse such
// requests (421 Misdirected Request) unless the name is one they were
// told to serve.
package loopback

import (
	"net"
	"net/http"
	"strings"
)

// IsName reports whether host (no port) names this machine's loopback:
// localhost, 127.0.0.0/8, ::1.
func IsName(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// HostAllowed reports whether a request's Host header (with or without a
// port) names loopback or one of allowed (compared without case).
func HostAllowed(hostHeader string, allowed []string) bool {
	host := hostHeader
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if IsName(host) {
		return true
	}
	for _, a := range allowed {
		if strings.EqualFold(host, a) {
			return true
		}
	}
	return false
}

// Guard serves next only the requests whose Host HostAllowed admits; the
// others get 421 Misdirected Request with refusal as the body.
func Guard(next http.Handler, allowed []string, refusal string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !HostAllowed(r.Host, allowed) {
			http.Error(w, refusal, http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}
