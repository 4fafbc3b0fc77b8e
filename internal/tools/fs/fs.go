// Package fs holds the model-facing file tools: read, write, edit and
// read_image, plus the helpers other file tools (str_replace_based_edit_tool)
// build on: path resolution, argument decoding, line-numbered views,
// literal replacement, atomic writes and a small line diff.
//
// write over an existing file and edit refuse to touch a file the session
// has not read, or that changed since it was read (the [Tracker] keeps the
// state of each file at its last read). That guard keeps a model from
// clobbering edits made by the user, another agent or a build step since
// it last looked.
package fs

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/tool"
)

// Tool error codes introduced by the file tools.
const (
	// CodeFileNotFound: the path does not exist.
	CodeFileNotFound = "FILE_NOT_FOUND"
	// CodeIsDirectory: a file was expected but the path is a directory.
	CodeIsDirectory = "IS_DIRECTORY"
	// CodeBinaryFile: the file holds binary data (a NUL byte early on).
	CodeBinaryFile = "BINARY_FILE"
	// CodeFileTooLarge: the file is too large for the operation.
	CodeFileTooLarge = "FILE_TOO_LARGE"
	// CodeNotRead: write/edit of an existing file never read this session.
	CodeNotRead = "NOT_READ"
	// CodeStaleRead: the file changed after the session last read it.
	CodeStaleRead = "STALE_READ"
	// CodeNoMatch: the text to replace does not occur in the file.
	CodeNoMatch = "NO_MATCH"
	// CodeNotUnique: the text to replace occurs more than once.
	CodeNotUnique = "NOT_UNIQUE"
	// CodeNotAnImage: read_image got a file that is not a supported image.
	CodeNotAnImage = "NOT_AN_IMAGE"
	// CodeImagesUnsupported: the current model route takes no images.
	CodeImagesUnsupported = "IMAGES_UNSUPPORTED"
)

// Model-facing tool names.
const (
	NameRead      = "read"
	NameWrite     = "write"
	NameEdit      = "edit"
	NameReadImage = "read_image"
)

// Defaults for zero Options fields.
const (
	DefaultMaxLines      = 2000
	DefaultMaxLineChars  = 2000
	DefaultMaxReadBytes  = 51200
	DefaultMaxEditBytes  = 64 << 20
	DefaultMaxImageSide  = 1568
	DefaultMaxImageBytes = 1 << 20
)

// Options configures the file tools. One Options value (and so one
// Tracker) should be shared by all of them: write and edit only accept
// files that read recorded in the same Tracker.
type Options struct {
	// Tracker records reads; nil means a process-wide tracker shared by
	// every tool built with a nil Tracker, so tools built separately still
	// see each other's reads (sessions are told apart by id).
	Tracker *Tracker
	// MaxLines is read's default and largest limit; 0 means
	// DefaultMaxLines.
	MaxLines int
	// MaxLineChars is where read cuts a long line; 0 means
	// DefaultMaxLineChars.
	MaxLineChars int
	// MaxReadBytes caps the bytes of one read result; 0 means
	// DefaultMaxReadBytes.
	MaxReadBytes int
	// MaxEditBytes is the largest file edit loads into memory; 0 means
	// DefaultMaxEditBytes.
	MaxEditBytes int
	// MaxImageSide bounds the longest side of an image read_image returns;
	// 0 means DefaultMaxImageSide.
	MaxImageSide int
	// MaxImageBytes bounds the encoded size of an image read_image
	// returns; 0 means DefaultMaxImageBytes.
	MaxImageBytes int
	// Images reports whether the model route serving the call accepts
	// image input; nil or false makes read_image fail with
	// IMAGES_UNSUPPORTED.
	Images func(c *tool.Call) bool
	// Policy returns the sandbox policy of a call (the permission
	// layer's BashConfiner.Policy, the same the permission guards check),
	// which the tools then apply while they work: reads check the file
	// they opened, writes go through a directory opened beneath a
	// writable root (see [Fence]). Nil leaves the tools unfenced.
	Policy func(c *tool.Call) sandbox.Policy
}

// sharedTracker backs Options with a nil Tracker.
var sharedTracker = NewTracker()

func (o Options) withDefaults() Options {
	if o.Tracker == nil {
		o.Tracker = sharedTracker
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxLines, DefaultMaxLines)
	def(&o.MaxLineChars, DefaultMaxLineChars)
	def(&o.MaxReadBytes, DefaultMaxReadBytes)
	def(&o.MaxEditBytes, DefaultMaxEditBytes)
	def(&o.MaxImageSide, DefaultMaxImageSide)
	def(&o.MaxImageBytes, DefaultMaxImageBytes)
	return o
}

// Tools returns read, write, edit and read_image built from one Options,
// so that they share its Tracker.
func Tools(opts Options) []tool.Definition {
	opts = opts.withDefaults()
	return []tool.Definition{NewRead(opts), NewWrite(opts), NewEdit(opts), NewReadImage(opts)}
}

// ResolvePath turns a path argument into a clean absolute path: "~" and
// "~/…" expand to the home directory and a relative path is taken against
// the session working directory. Every file tool resolves paths through
// it, so a restriction added to it applies to all of them.
func ResolvePath(c *tool.Call, p string) (string, error) {
	return resolvePath(c, p)
}

// resolvePath is the single place paths are resolved; a workspace fence
// can wrap it later.
func resolvePath(c *tool.Call, p string) (string, error) {
	if strings.TrimSpace(p) == "" {
		return "", tool.Errorf(tool.CodeInvalidArgs, "the path must be a non-empty string")
	}
	if strings.ContainsRune(p, 0) {
		return "", tool.Errorf(tool.CodeInvalidArgs, "the path must not contain NUL bytes")
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", tool.Errorf(tool.CodeFailed, "cannot expand ~: %v", err)
		}
		p = filepath.Join(home, p[1:])
	}
	if !filepath.IsAbs(p) {
		base := ""
		if c != nil {
			base = c.Cwd
		}
		if base == "" {
			wd, err := os.Getwd()
			if err != nil {
				return "", tool.Errorf(tool.CodeFailed, "cannot determine the working directory: %v", err)
			}
			base = wd
		}
		p = filepath.Join(base, p)
	}
	return filepath.Clean(p), nil
}

// statError maps a stat/open failure on path to a tool error; a missing
// file gets suggestions of similarly named files.
func statError(path string, err error) error {
	if os.IsNotExist(err) {
		return notFound(path)
	}
	if os.IsPermission(err) {
		return tool.Errorf(tool.CodeFailed, "permission denied: %s", path)
	}
	return tool.Errorf(tool.CodeFailed, "cannot access %s: %v", path, unwrapPath(err))
}

// unwrapPath drops the *PathError wrapper, whose message repeats the path
// the caller already names.
func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// isDirError is the error for a directory given where a file is expected.
func isDirError(path string) error {
	return tool.Errorf(CodeIsDirectory, "%s is a directory, not a file. To list it, use bash (`ls %s`) or the glob tool", path, path)
}
