//go:build !linux && !darwin

package peers

// osBuild is unknown on other systems.
func osBuild() string { return "" }
