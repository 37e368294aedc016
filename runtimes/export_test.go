package runtimes

// What the tests of package runtimes_test read of the package's insides.
var (
	// HostFS is hostFS: the host files WriteHost writes.
	HostFS = hostFS
	// PlatformEnvNames is platformEnvNames: the variables Env may set.
	PlatformEnvNames = platformEnvNames
)
