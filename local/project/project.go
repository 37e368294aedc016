package project

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kfn-dev/kfn/api/manifest"
)

// Project is what a directory defines.
type Project struct {
	// Dir is the directory that was read.
	Dir string
	// Set holds the admitted Functions, Subscriptions and APIRules, the
	// documents of other kinds, and one error per refused document or
	// unreadable file.
	manifest.Set
	// Files are the files that were read, sorted; a change to any of them
	// (or a new file) means the project should be read again.
	Files []string
	// Sources tell where each Function ("namespace/name") was written:
	// its function folder, or the manifest file of an inline source, so
	// that messages point at the user's file.
	Sources map[string]string
	// Origins name the file of each admitted object, by ObjectKey.
	Origins map[string]string
	// Broken are the files with a document that could not be used (a
	// function folder's config.yaml stands for its whole folder), and the
	// directories that could not be listed (whole or in part), which stand
	// for every file under them, and the manifest files found empty.
	Broken map[string]bool
	// Empty are the manifest files of no bytes at all: a file an editor
	// has truncated and not yet written, as often as one meant to be
	// empty. Each is Broken without an error of its own; KeepFrom keeps
	// what it defined before and then reports it (remove the file to remove
	// them), so that an empty file never takes down what it ran.
	Empty map[string]bool
	// ReadFailed tells that a directory or a file could not be read (as
	// opposed to read and found wrong): out of file descriptors, a
	// permission, an I/O error. What it defined is kept (KeepFrom), never
	// taken for deleted; reading the project again may succeed.
	ReadFailed bool
}

// ObjectKey names an object in Origins: "Kind namespace/name".
func ObjectKey(kind, namespace, name string) string {
	return kind + " " + namespace + "/" + name
}

// SkipDir reports whether a directory is never searched: hidden ones (.git,
// .kfn with local state), dependency trees and Python caches.
func SkipDir(name string) bool {
	return strings.HasPrefix(name, ".") || name == "node_modules" || name == "__pycache__" || name == "venv"
}

// IsManifestFile reports whether a file name is one Load reads.
func IsManifestFile(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return name != "package.json" && name != "package-lock.json" && name != "tsconfig.json"
	}
	return false
}

// Load reads every manifest and function folder under dir. A file or
// document that cannot be used is reported in Invalid (with its file, and
// for manifests the field and reason) and the rest are still loaded; Load
// itself fails only when dir cannot be read.
func Load(ctx context.Context, dir string, admitter *manifest.Admitter) (*Project, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("read project: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("read project: %s is not a directory", dir)
	}
	p := &Project{Dir: dir, Broken: map[string]bool{}, Empty: map[string]bool{}}
	var docs []manifest.Document
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			// A directory that cannot be listed, whole or in part, is
			// Broken for every file under it: what they defined is kept,
			// not taken for deleted.
			p.unreadable(path, err)
			return nil
		}
		if d.IsDir() {
			if path != dir && SkipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !IsManifestFile(d.Name()) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			p.unreadable(path, err)
			return nil
		}
		p.Files = append(p.Files, path)
		if len(data) == 0 {
			p.Empty[path] = true
			p.Broken[path] = true
			return nil
		}
		if d.Name() == ConfigFile && IsFolderConfig(data) {
			folderDocs, err := ReadFolder(path)
			if err != nil {
				p.Invalid = append(p.Invalid, err)
				p.Broken[path] = true
				p.ReadFailed = p.ReadFailed || readFailure(err)
				return nil
			}
			p.Files = append(p.Files, folderSources(filepath.Dir(path))...)
			docs = append(docs, folderDocs...)
			return nil
		}
		fileDocs, err := manifest.Decode(path, data)
		if err != nil {
			p.Invalid = append(p.Invalid, err)
			p.Broken[path] = true
			return nil
		}
		docs = append(docs, fileDocs...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read project %s: %w", dir, err)
	}
	p.Sources = sources(docs)
	set := admitter.Load(ctx, docs)
	for _, err := range set.Invalid {
		if invalid := (*manifest.InvalidError)(nil); errors.As(err, &invalid) {
			p.Broken[invalid.Document.File] = true
		}
	}
	set.Invalid = append(p.Invalid, set.Invalid...)
	p.Set = set
	p.Origins = origins(docs, set)
	sort.Strings(p.Files)
	return p, nil
}

// unreadable records that path, a file or a directory, could not be read:
// it is Broken, and the error is reported.
func (p *Project) unreadable(path string, err error) {
	p.Invalid = append(p.Invalid, fmt.Errorf("%s: %w", path, err))
	p.Broken[path] = true
	p.ReadFailed = p.ReadFailed || readFailure(err)
}

// readFailure reports whether err is a failure to read a file or a
// directory that exists (a file that is gone is not one: the next listing
// will not have it).
func readFailure(err error) bool {
	var pathErr *fs.PathError
	return errors.As(err, &pathErr) && !errors.Is(err, fs.ErrNotExist)
}

// origins maps every admitted object of set to the file of its document.
func origins(docs []manifest.Document, set manifest.Set) map[string]string {
	files := map[string]string{}
	for _, d := range docs {
		key := ObjectKey(d.Object.GetKind(), namespaceOf(d), d.Object.GetName())
		if _, dup := files[key]; !dup {
			files[key] = d.File
		}
	}
	out := map[string]string{}
	for _, fn := range set.Functions {
		key := ObjectKey("Function", fn.Namespace, fn.Name)
		out[key] = files[key]
	}
	for _, s := range set.Subscriptions {
		key := ObjectKey("Subscription", s.Namespace, s.Name)
		out[key] = files[key]
	}
	for _, r := range set.APIRules {
		key := ObjectKey("APIRule", r.Namespace, r.Name)
		out[key] = files[key]
	}
	return out
}

// KeepFrom carries over from prev, the project as read before, every
// Function, Subscription, APIRule and other document (the ConfigMaps and Secrets
// functions read) that came from a file p could not use, or from under a
// directory p could not list, and that p lacks: a file saved half-written,
// or with a mistake, reports its error and leaves what it defined running
// as it was, instead of removing it; a directory that cannot be listed
// (kfn dev out of file descriptors) removes nothing. What a file that
// reads well no longer defines, and a file a listing no longer has, are
// gone, as before.
func (p *Project) KeepFrom(prev *Project) {
	if prev == nil || len(p.Broken) == 0 {
		return
	}
	for _, fn := range prev.Functions {
		key := ObjectKey("Function", fn.Namespace, fn.Name)
		if p.keeps(prev, key) {
			p.Functions = append(p.Functions, fn)
			p.Origins[key] = prev.Origins[key]
			p.Sources[fn.Namespace+"/"+fn.Name] = prev.Sources[fn.Namespace+"/"+fn.Name]
		}
	}
	p.Subscriptions = keepObjects(p, prev, "Subscription", p.Subscriptions, prev.Subscriptions)
	p.APIRules = keepObjects(p, prev, "APIRule", p.APIRules, prev.APIRules)
	present := make(map[string]bool, len(p.Ignored))
	for _, d := range p.Ignored {
		present[ObjectKey(d.Object.GetKind(), namespaceOf(d), d.Object.GetName())] = true
	}
	for _, d := range prev.Ignored {
		if !present[ObjectKey(d.Object.GetKind(), namespaceOf(d), d.Object.GetName())] && p.brokenAt(d.File) {
			p.Ignored = append(p.Ignored, d)
		}
	}
	p.reportEmpty()
}

// reportEmpty reports, for each Empty file that KeepFrom kept objects of,
// what it kept and how to remove them.
func (p *Project) reportEmpty() {
	kept := map[string][]string{}
	for key, file := range p.Origins {
		if p.Empty[file] {
			kept[file] = append(kept[file], key)
		}
	}
	for _, d := range p.Ignored {
		if p.Empty[d.File] {
			kept[d.File] = append(kept[d.File], ObjectKey(d.Object.GetKind(), namespaceOf(d), d.Object.GetName()))
		}
	}
	files := make([]string, 0, len(kept))
	for file := range kept {
		files = append(files, file)
	}
	sort.Strings(files)
	for _, file := range files {
		keys := kept[file]
		sort.Strings(keys)
		p.Invalid = append(p.Invalid, fmt.Errorf("%s: the file is empty (still being saved?): %s kept as defined before; remove the file to remove them",
			file, strings.Join(keys, ", ")))
	}
}

// keepObjects returns objs with the objects of kind of prev's (before)
// that p keeps (keeps), their origins recorded in p.
func keepObjects[T interface {
	GetNamespace() string
	GetName() string
}](p, prev *Project, kind string, objs, before []T) []T {
	for _, o := range before {
		key := ObjectKey(kind, o.GetNamespace(), o.GetName())
		if p.keeps(prev, key) {
			objs = append(objs, o)
			p.Origins[key] = prev.Origins[key]
		}
	}
	return objs
}

// keeps reports whether the object key of prev came from a file broken in
// p and is missing from p.
func (p *Project) keeps(prev *Project, key string) bool {
	file, ok := prev.Origins[key]
	if !ok || !p.brokenAt(file) {
		return false
	}
	_, present := p.Origins[key]
	return !present
}

// brokenAt reports whether file, or a directory above it, is Broken in p.
func (p *Project) brokenAt(file string) bool {
	for path := file; ; {
		if p.Broken[path] {
			return true
		}
		parent := filepath.Dir(path)
		if path == p.Dir || parent == path {
			return false
		}
		path = parent
	}
}

// sources maps the Functions of docs to their folders (for a folder's
// config.yaml) or manifest files.
func sources(docs []manifest.Document) map[string]string {
	out := map[string]string{}
	for _, d := range docs {
		if d.Object.GetKind() != "Function" {
			continue
		}
		where := d.File
		if filepath.Base(d.File) == ConfigFile {
			where = filepath.Dir(d.File)
		}
		out[namespaceOf(d)+"/"+d.Object.GetName()] = where
	}
	return out
}

// namespaceOf is a document's namespace, "default" when it names none (as
// the admitted object's).
func namespaceOf(d manifest.Document) string {
	if ns := d.Object.GetNamespace(); ns != "" {
		return ns
	}
	return "default"
}

// folderSources lists the code and dependency files of a function folder,
// which Load watches besides config.yaml.
func folderSources(dir string) []string {
	var out []string
	for _, name := range []string{"handler.js", "handler.mjs", "handler.cjs", "handler.py", "package.json", "requirements.txt", ".npmrc", "pip.conf"} {
		if p := filepath.Join(dir, name); exists(p) {
			out = append(out, p)
		}
	}
	return out
}
