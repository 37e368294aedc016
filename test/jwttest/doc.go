// Package jwttest is an OpenID token issuer for tests: RSA and EC keys,
// tokens signed with them, and its JWKS served on loopback, its fetches
// counted and its failure at will.
package jwttest
