"""Installing backends into the cache Lemonade shares (see DESIGN.md "Install cache")."""
