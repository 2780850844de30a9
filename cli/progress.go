package cli

import (
	"io"
	"os"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"
)

// transferBar is a progress bar of bytes on stderr for a long transfer. It
// is shown only when stderr is a terminal; a nil *transferBar (what
// startTransferBar returns otherwise) shows nothing, and its methods do
// nothing.
type transferBar struct {
	p   *mpb.Progress
	bar *mpb.Bar
}

// startTransferBar shows a bar named name for total bytes on stderr, if
// stderr is a terminal and there is anything to transfer.
func startTransferBar(name string, total int64) *transferBar {
	if total <= 0 || !term.IsTerminal(int(os.Stderr.Fd())) {
		return nil
	}
	return newTransferBar(os.Stderr, name, total)
}

func newTransferBar(w io.Writer, name string, total int64) *transferBar {
	p := mpb.New(mpb.WithOutput(w), mpb.WithWidth(40))
	bar := p.AddBar(total,
		mpb.BarRemoveOnComplete(),
		mpb.PrependDecorators(
			decor.Name("rbs: "+name+" "),
			decor.CountersKibiByte("% .1f / % .1f"),
		),
		mpb.AppendDecorators(decor.Percentage()),
	)
	return &transferBar{p: p, bar: bar}
}

// Add moves the bar on by n bytes.
func (b *transferBar) Add(n int64) {
	if b != nil {
		b.bar.IncrInt64(n)
	}
}

// Finish takes the bar off the terminal, completed or abandoned, and waits
// until it is gone, so that what is printed next starts on a clean line.
func (b *transferBar) Finish(ok bool) {
	if b == nil {
		return
	}
	if ok {
		b.bar.SetTotal(-1, true)
	} else {
		b.bar.Abort(true)
	}
	b.p.Wait()
}
