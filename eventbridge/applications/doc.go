// Package applications knows Kyma's Applications
// (applications.applicationconnector.kyma-project.io, cluster-wide) by name
// and the application type each one names in its application-type label,
// which Kyma's publisher routes an application's events by. It watches
// only their metadata, and only once their CRD is served.
package applications
