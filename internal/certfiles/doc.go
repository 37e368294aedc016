// Package certfiles is the TLS of a server whose certificate and key (and
// the CA of its clients' certificates) are files, a mounted Secret: the
// files are read again whenever one of them changes, so that a rotated
// certificate (the chart's, cert-manager's) is used without a restart,
// and a file that is missing or half written keeps the last good set.
package certfiles
