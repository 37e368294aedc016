package apiroute

import "fmt"

// methodSet holds one bit per method a rule may list.
type methodSet uint16

// methodNames are the methods a rule may list, in the order of their bits.
var methodNames = [...]string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}

// names returns the methods of the set, in methodNames' order.
func (s methodSet) names() []string {
	var out []string
	for i, m := range methodNames {
		if s&(1<<i) != 0 {
			out = append(out, m)
		}
	}
	return out
}

// methodBit returns the bit of method, zero for a method no rule may list.
func methodBit(method string) methodSet {
	switch method {
	case "GET":
		return 1 << 0
	case "HEAD":
		return 1 << 1
	case "POST":
		return 1 << 2
	case "PUT":
		return 1 << 3
	case "DELETE":
		return 1 << 4
	case "CONNECT":
		return 1 << 5
	case "OPTIONS":
		return 1 << 6
	case "TRACE":
		return 1 << 7
	case "PATCH":
		return 1 << 8
	}
	return 0
}

// parseMethods returns the set of methods, refusing an empty list and an
// unknown method.
func parseMethods(methods []string) (methodSet, error) {
	if len(methods) == 0 {
		return 0, fmt.Errorf("%w: the rule lists no method", ErrInvalidMethod)
	}
	var set methodSet
	for _, m := range methods {
		bit := methodBit(m)
		if bit == 0 {
			return 0, fmt.Errorf("%w %q: want one of GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH", ErrInvalidMethod, m)
		}
		set |= bit
	}
	return set, nil
}
