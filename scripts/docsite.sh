#!/usr/bin/env bash
# Build the collection's docsite into HTML, the way the Ansible docsite does it:
# `antsibull-docs sphinx-init` + `antsibull-docs collection` + Sphinx, warnings
# as errors (-W). Pages: every module, filter and role (with its entry points)
# and the playbooks from the collection's own documentation, plus the guides of
# docs/*.md but the developers' pages (Markdown, rendered with MyST; the Ansible docsite itself only takes
# RST extra docs, so there the guides are linked from docs/docsite/links.yml).
# Tools: the pinned publish venv (requirements/publish.txt, scripts/setup.sh).
# Output: .cache/docsite/build/html (index.html; collections/nodefix/k8s/*.html).
# Usage: scripts/docsite.sh [DEST]
set -euo pipefail
. "$(dirname "$0")/env.sh"
cd "$NODEFIX_ROOT"
venv="$NODEFIX_CACHE/publish-venv"
dest=${1:-$NODEFIX_CACHE/docsite}
export PATH="$venv/bin:$PATH"
version=$(sed -n 's/^version:[[:space:]]*//p' galaxy.yml)

rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
mkdir -m 755 "$dest"   # antsibull-docs wants a directory only its owner writes
antsibull-docs sphinx-init --use-current --fail-on-error --dest-dir "$dest" \
  --project nodefix.k8s --title "nodefix.k8s $version" --copyright "nodefix.k8s developers" \
  --collection-version "$version" nodefix.k8s >/dev/null

# Ansible's own labels (return values, config, other collections' modules) from
# an inventory of their real addresses: the build reaches no network.
python3 scripts/docsite_inventory.py "$dest/ansible_devel.inv"
cat >> "$dest/conf.py" <<'CONF'

# --- added by scripts/docsite.sh -------------------------------------------
intersphinx_mapping = {
    'ansible_devel': ('https://docs.ansible.com/projects/ansible/devel/', '../ansible_devel.inv'),
}
extensions.append('myst_parser')
source_suffix = {'.rst': 'restructuredtext', '.md': 'markdown'}
myst_heading_anchors = 3
CONF

# The guides, and the site's front page listing the collection and the guides.
# The developers' pages (conventions, the test layers, the test command's time log) are not guides
# for users: they stay in the repository, out of the docsite (held by tests/unit/test_readme_shape.py).
developer_pages=(DEVELOPING testing test-times)
mkdir -p "$dest/rst/guides"
guides=()
for md in docs/*.md; do
  name=$(basename "$md" .md)
  [[ " ${developer_pages[*]} " == *" $name "* ]] && continue
  cp "$md" "$dest/rst/guides/$name.md"
  guides+=("$name")
done
{
  printf 'nodefix.k8s %s\n' "$version"
  printf '%s\n\n' "$(printf '%*s' "$((12 + ${#version}))" '' | tr ' ' '=')"
  printf 'Find, fix and verify the Kubernetes node failures that take production clusters down.\n\n'
  printf '.. toctree::\n   :maxdepth: 2\n   :caption: Collection\n\n   collections/index\n\n'
  printf '.. toctree::\n   :maxdepth: 1\n   :caption: Guides\n\n'
  for g in "${guides[@]}"; do printf '   guides/%s\n' "$g"; done
} > "$dest/rst/index.rst"

(cd "$dest" && bash build.sh)
echo "docsite: $dest/build/html/index.html"
