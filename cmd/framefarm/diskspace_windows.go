//go:build windows

package main

import "golang.org/x/sys/windows"

// diskSpace is what the volume holding dir has free (to this user) and its size.
func diskSpace(dir string) (free, size uint64, err error) {
	path, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, 0, err
	}
	err = windows.GetDiskFreeSpaceEx(path, &free, &size, nil)
	return free, size, err
}
