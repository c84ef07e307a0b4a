// The code editor of the exercise page: CodeMirror 6 with Python highlighting.
// Bundled by esbuild into static/vendor/codemirror.js (global `RdvEditor`); see package.json.
// A lean set of extensions (no completion pop-ups or search panel): it loads fast on a phone.
import { EditorState } from "@codemirror/state";
import {
  EditorView,
  drawSelection,
  highlightActiveLine,
  highlightActiveLineGutter,
  keymap,
  lineNumbers,
} from "@codemirror/view";
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import {
  bracketMatching,
  defaultHighlightStyle,
  indentOnInput,
  syntaxHighlighting,
} from "@codemirror/language";
import { closeBrackets, closeBracketsKeymap } from "@codemirror/autocomplete";
import { python } from "@codemirror/lang-python";

// Tab indents inside the editor; Escape then Tab moves focus out (CodeMirror's convention).
// `nonce`: the page's CSP nonce, for the <style> element CodeMirror adds (no inline styles
// are allowed otherwise).
export function createEditor(parent, { doc = "", label = "Code editor", onChange, nonce } = {}) {
  const view = new EditorView({
    parent,
    state: EditorState.create({
      doc,
      extensions: [
        lineNumbers(),
        highlightActiveLineGutter(),
        history(),
        drawSelection(),
        indentOnInput(),
        syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
        bracketMatching(),
        closeBrackets(),
        highlightActiveLine(),
        keymap.of([...closeBracketsKeymap, ...defaultKeymap, ...historyKeymap, indentWithTab]),
        python(),
        EditorState.tabSize.of(4),
        EditorView.lineWrapping,
        ...(nonce ? [EditorView.cspNonce.of(nonce)] : []),
        EditorView.contentAttributes.of({ "aria-label": label }),
        EditorView.updateListener.of((update) => {
          if (update.docChanged && onChange) onChange(update.state.doc.toString());
        }),
      ],
    }),
  });
  return {
    view,
    getValue: () => view.state.doc.toString(),
    setValue: (text) =>
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } }),
    focus: () => view.focus(),
  };
}
