// Package trigger is the contract between the KEDA ScaledObjects kfn's
// controller writes and kfn's external scaler that serves them: the trigger
// type, the keys of the trigger's metadata, and how that metadata is
// rendered ([Metadata.Render]) and parsed ([Parse]). Both sides use it, so
// they cannot drift apart.
package trigger
