package llm

// PieceSize is the capacity of a new piece of an assembled prefix (see
// AppendPieces).
const PieceSize = 64 << 10

// AppendPieces appends p to pieces, an encode cache's assembled prefix
// held as the pieces of a request body: first into the room left in the
// last piece, then into new pieces of PieceSize. A piece is only ever
// appended to past its length, so a body holding earlier lengths of
// the pieces never sees a change. Filling the last piece before starting
// a new one keeps the prefix's memory within one piece of its length
// (appending a message whole to a new piece when it did not fit left up
// to half of each piece empty with messages of half a piece or more).
func AppendPieces(pieces [][]byte, p []byte) [][]byte {
	for len(p) > 0 {
		if n := len(pieces); n > 0 {
			last := pieces[n-1]
			if room := cap(last) - len(last); room > 0 {
				k := min(room, len(p))
				pieces[n-1] = append(last, p[:k]...)
				p = p[k:]
				continue
			}
		}
		pieces = append(pieces, make([]byte, 0, PieceSize))
	}
	return pieces
}
