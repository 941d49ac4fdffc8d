package renderer

import "strconv"

// Count writes n of a noun for a person to read: "1 asset", "3 assets" (the noun's plural is
// taken to end in s).
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
