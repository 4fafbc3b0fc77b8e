package app

import "sort"

// DefaultModel is the "provider/model" a new session gets when none is
// named (the profile's model row, else the built-in default).
func (a *App) DefaultModel() string { return a.modelDefaults().Default }

// PresetNames lists the profile's agent presets, name-sorted.
func (a *App) PresetNames() []string {
	var names []string
	for n := range a.presets() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
