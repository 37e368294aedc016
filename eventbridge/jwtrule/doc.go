// Package jwtrule checks requests against an APIRule rule's jwt access
// strategy as Kyma's APIRule v2 reads it (Istio's RequestAuthentication
// and AuthorizationPolicy): the token is read from the places each
// authentication names (the Authorization header with the Bearer prefix
// by default), its signature verified against its issuer's JWKS, its
// issuer, expiry and not-before checked, and the request let through when
// the token grants one of the authorizations (all of its required scopes,
// from the scp, scope or scopes claim, and all of its audiences), or any
// valid token when there are none. A request without a token is refused
// 403, one with a token that does not verify 401, one whose token grants
// too little 403; the token is not forwarded.
//
// A jwksUri is a tenant's input: KeySets fetches key sets through the
// same egress rules as deliveries, bounded in time and bytes, caches them,
// fetches one again at most every MinRefetch for a key it does not know,
// and keeps the keys it had when a fetch fails.
package jwtrule
