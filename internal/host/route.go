package host

// Route describes the model route of live session id: its
// "provider/model" spec and whether the model accepts images. ok is false
// when the session is not live here (a stored session's model is the one
// its log's last request/context names).
func (h *Host) Route(id string) (spec string, images bool, ok bool) {
	e, _ := h.lookup(id)
	if e == nil {
		return "", false, false
	}
	r := e.sess.Route
	return r.Provider + "/" + r.Model.ID, r.Model.Images, true
}
